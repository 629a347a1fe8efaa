from glob import glob

from setuptools import find_packages, setup

package_name = 'manip_design'

setup(
    name=package_name,
    version='0.1.0',
    packages=sorted({package_name, *find_packages(exclude=['test', 'test.*'])}),
    package_data={package_name: ['examples/*.mrs', 'examples/*.txt']},
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
        ('share/' + package_name + '/examples', glob('manip_design/examples/*.mrs')
         + glob('manip_design/examples/*.txt')),
    ],
    install_requires=['setuptools'],
    zip_safe=False,
    maintainer='manip maintainers',
    maintainer_email='maintainers@manip-robotics.org',
    description='Robot design: a structure language (.mrs) for serial and parallel arms, mobility check, '
                'closed-chain kinematics, link-length synthesis and SymPy code generation.',
    license='Apache-2.0',
    tests_require=['pytest'],
    entry_points={
        'console_scripts': [
            'manip-design = manip_design.cli:main',
        ],
    },
)
