from setuptools import find_packages, setup

package_name = 'manip_view'

setup(
    name=package_name,
    version='0.1.0',
    packages=sorted({package_name, *find_packages(exclude=['test', 'test.*'])}),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
    ],
    install_requires=['setuptools'],
    zip_safe=False,
    maintainer='manip maintainers',
    maintainer_email='maintainers@manip-robotics.org',
    description='Browser viewer of a manipulator (viser): the arm from its description, joint sliders, '
                'FK readout and manipulability (manip-view).',
    license='Apache-2.0',
    tests_require=['pytest'],
    entry_points={
        'console_scripts': [
            'manip-view = manip_view.cli:main',
            'viewer = manip_view:viewer_main',
        ],
    },
)
